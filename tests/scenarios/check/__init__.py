"""Scenarios of ``perdure check`` on stores a real ``perdure serve`` of old code wrote."""
