"""Files: where the zoo keeps them and how it writes them (whole, never through a link), JSON
read within a limit, archives extracted once, a run folder's lock, and a full disk told from a
bug."""
