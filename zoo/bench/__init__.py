"""`zoo bench`: the one timing harness, its worker processes and the GPU works."""
