from cosmos_local import main

main()
