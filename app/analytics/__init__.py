"""Analytics for instructors: item analysis of a card's attempts (:mod:`app.analytics.service`)."""
