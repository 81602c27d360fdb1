"""The Model Context Protocol front end (``kbsync mcp``): :mod:`.server`."""
