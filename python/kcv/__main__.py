from kcv._launcher import main

main()
