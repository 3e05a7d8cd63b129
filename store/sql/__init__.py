"""SQL text for each store area, kept beside the schema."""
