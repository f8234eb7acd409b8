"""infracards: practise AI-infrastructure knowledge cards as generated questions."""
