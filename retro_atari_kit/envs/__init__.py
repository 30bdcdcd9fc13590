"""One module per emulator backend; each builds the wrapped env for its IDs."""
