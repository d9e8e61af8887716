"""`envforge prompt`: a workspace with the task for a coding agent envforge does not run, and
the next repair prompt written from a verify report."""
