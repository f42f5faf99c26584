"""Loading: `zoo.load` (names, paths, URLs, hub handles), the hub handles and their builders."""
