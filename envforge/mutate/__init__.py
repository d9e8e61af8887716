"""Mutation testing of the verifier: small semantic changes to a port it must catch."""
