"""The Streamlit reliability dashboard."""
