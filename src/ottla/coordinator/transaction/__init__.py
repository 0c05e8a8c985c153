"""The transaction coordinator (KIP-98, KIP-890): transactional ids, their producer ids and
epochs, and the state of each one's transaction, kept in ``__transaction_state``."""
