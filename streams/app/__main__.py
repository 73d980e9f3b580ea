from streams.app.cli import main

main()
