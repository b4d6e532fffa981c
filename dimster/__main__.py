from dimster.cli.app import main

main()
