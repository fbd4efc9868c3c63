int config_port();
struct ThirdUser {
  ThirdUser() : saw(config_port()) {}
  int saw;
};
ThirdUser g_third_user;
