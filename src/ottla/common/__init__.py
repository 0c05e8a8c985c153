"""What every layer of Ottla may know: ids, internal topic names, feature levels, the
config schema, and small helpers for files and logs. Nothing here imports the rest of
Ottla."""
