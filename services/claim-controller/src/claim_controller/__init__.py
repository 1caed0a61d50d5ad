"""ResourceClaims for pods from templates through to deletion."""
