"""The card catalog: the cards from ``cards/`` and every version the database has kept."""
