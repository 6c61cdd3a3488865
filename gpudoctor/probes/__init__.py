"""Probes turn host answers into typed, frozen facts. A probe never raises for machine trouble."""
