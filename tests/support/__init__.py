"""Test helpers shared across test packages (the OpenAI-compatible stub server)."""
