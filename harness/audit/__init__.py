"""The configuration audit: judge collected facts against a profile's `config:` rules, and
capture a known-good node's facts as a golden profile."""
