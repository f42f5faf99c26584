"""The `zoo` command."""
