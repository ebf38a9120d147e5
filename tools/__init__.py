"""Developer tools run from a checkout (not shipped in the wheel or the bundle)."""
