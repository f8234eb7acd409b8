"""Use cases of the service: each function takes the database session and the loaded cards."""
