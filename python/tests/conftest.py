def pytest_configure(config):
    # Tests marked live speak through the sound server (PULSE_SERVER, else the user's own):
    # `-m "not live"` leaves them out where there is none.
    config.addinivalue_line("markers", "live: speaks through the sound server")
