import SpeakCLI

await Speak.main()
