"""What the dashboard's keys do: run control for the Runs view and the quit confirmation, the
Memory view's fact and note keys, and accepting or rejecting one note."""
