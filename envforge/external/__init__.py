"""envforge for coding agents it does not run: a workspace with the task (`envforge prompt`),
the next repair prompt from a report, and an MCP server over the verifier (`envforge mcp`)."""
