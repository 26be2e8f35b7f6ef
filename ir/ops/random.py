"""The random op family (see the op-coverage issue). Ops register themselves here."""
