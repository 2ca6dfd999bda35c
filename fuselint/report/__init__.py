"""Reports: findings formatted for people (text, markdown) and machines (json, sarif, github)."""
