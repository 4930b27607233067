# Warnings for our own targets: call mcserve_warnings(target).
function(mcserve_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers>)
endfunction()
