"""`envforge mcp`: an MCP server over the verifier, for a coding agent envforge does not run."""
