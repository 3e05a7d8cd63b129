"""The workspace folder: finding and creating it, the damage mark, doctor, salvage and
migration to PostgreSQL."""
