#include "tap.h"
#include "harness.h"
int main(void){plan(1);ok(1,"placeholder");return done_testing();}
