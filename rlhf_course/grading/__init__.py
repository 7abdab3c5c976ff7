"""Grading tools: notebook surgery, the nbgrader extension, and the course pipeline."""
