"""A reference DRA driver with fake GPUs."""
