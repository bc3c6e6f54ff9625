# Runs the layering check on the fixture tree (tests/layering/upward/src), whose ops/dispatch.h
# includes from autograd/, and passes only when the check refuses it with a line naming that include.
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${CMAKE_CURRENT_LIST_DIR}/upward/src
                        -P ${CMAKE_CURRENT_LIST_DIR}/../../cmake/check_layers.cmake
                RESULT_VARIABLE result ERROR_VARIABLE errors OUTPUT_VARIABLE output)
if(result EQUAL 0)
  message(FATAL_ERROR "the layering check accepted an upward include (ops/dispatch.h -> autograd/engine.h)")
endif()
if(NOT errors MATCHES "layering: ops/dispatch.h includes \"autograd/engine.h\"")
  message(FATAL_ERROR "the layering check failed without naming the upward include: ${errors}")
endif()
