"""Attacks on the Arena server, kept as regressions: each test plays a hostile user (an
uploaded environment, a job, a crafted request or archive) against a real server or its
parts, and asserts that the attack is refused or contained."""
