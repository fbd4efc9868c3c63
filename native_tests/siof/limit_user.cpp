extern int g_limit;
struct LimitUser {
  LimitUser() : saw(g_limit) {}
  int saw;
};
LimitUser g_limit_user;
