"""The engine: formulas, cards, question generation and grading. Plain Python: no web or
database imports."""
