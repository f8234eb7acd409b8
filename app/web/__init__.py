"""HTML pages: card list, card page, practice, feedback, my mistakes."""
