print("speakd")
