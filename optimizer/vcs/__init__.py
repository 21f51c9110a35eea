"""Committing the winner to git or Mercurial without touching the user's other work."""
