"""Practice: questions, answers, practice sessions and the mistake book."""
