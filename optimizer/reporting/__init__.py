"""What a run tells people: the result object and exit codes, the live log, Markdown and HTML reports."""
