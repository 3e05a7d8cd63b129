"""What the dashboard's keys do: run control for the Runs view and the quit confirmation."""
