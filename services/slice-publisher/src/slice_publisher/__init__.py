"""Drivers' inventory to ResourceSlices."""
