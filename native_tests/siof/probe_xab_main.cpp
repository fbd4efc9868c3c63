// The program of the libA/libB fixtures: it reads nothing; its libraries' initializers do.
int main() { return 0; }
