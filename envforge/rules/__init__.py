"""From a rules text to a reference: rule cases, N-version comparison and rule questions
(``envforge rules``; docs/RULES.md)."""
