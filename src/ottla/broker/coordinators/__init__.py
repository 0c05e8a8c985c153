"""The asyncio drivers of the coordinators (group, transaction, share) over their internal
topics, the transaction marker channel, and producer ids."""
