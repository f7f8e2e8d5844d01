from harness.cli.start import main

main()
